"""The report page's style sheet and script, inlined into the one HTML file by html.render: the
script shows one view at a time by the address's #anchor (every view in order without it) and draws
a record's per-example outcomes (the bits of the page's ``outcomes-data``) when its button is
pressed."""

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#223;color:#eee;padding:8px 16px;position:sticky;top:0;z-index:2}
header a{color:#cde;margin-right:12px;text-decoration:none}header a.on{color:#fff;font-weight:bold;text-decoration:underline}
header .fams a{font-size:12px;margin-right:8px}
main{padding:8px 20px}h2{margin-top:8px}
table{border-collapse:collapse;margin:6px 0;font-size:13px;background:#fff}
td,th{border:1px solid #ddd;padding:2px 6px;vertical-align:top}th{background:#f0f0f4;text-align:left}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td.paper{color:#666}td.chance{background:#fff3d6}
.scroll{overflow-x:auto;max-width:100%}
.v.holds,.o.win{color:#17692e}.v.fails,.o.loss{color:#b3261e}.v.unsure,.o.tie{color:#7a6a00}
.learned{font-size:11px;color:#555}.why{font-size:11px;color:#666;max-width:560px}.prov{font-size:11px;color:#b36b00}
.meta,.rule{font-size:12px;color:#555}section.table{border-top:2px solid #ccd;margin-top:18px}
.plots{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0;background:#fff;border:1px solid #ddd;padding:4px;max-width:650px}
figcaption{font-size:11px;color:#555}
svg text{font-size:11px;fill:#333}svg .label{font-size:12px}svg .legend{font-size:11px}
svg .frame{fill:#fff;stroke:#999}svg .grid{stroke:#eee}svg .chance{fill:none;stroke:#888;stroke-dasharray:5 4;stroke-width:1.5}
.swatch{display:inline-block;width:14px;height:14px;margin-right:8px;border-radius:2px}
details.record{background:#fff;border:1px solid #ddd;margin:3px 0;padding:2px 6px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 10px;font-size:12px}dt{color:#666}
pre{font-size:11px;max-height:300px;overflow:auto;background:#f6f6f6}
.hit{outline:3px solid #f28e2b}[id]{scroll-margin-top:90px}.o.no-test{color:#888}
table.claims td:first-child{min-width:260px;max-width:420px}table.claims td.links{font-size:12px;min-width:220px}
.ocgrid{display:block;margin:4px 0;image-rendering:pixelated;border:1px solid #ccc}
.js .view{display:none}.js .view.active{display:block}
"""

JS = r"""
(function(){
  document.body.classList.add('js');
  var data = JSON.parse(document.getElementById('outcomes-data').textContent);
  function show(id){
    var el = id && document.getElementById(id);
    if(!el){ el = document.getElementById('view-overview'); }
    var v = el.classList.contains('view') ? el : el.closest('.view');
    document.querySelectorAll('.view').forEach(function(x){ x.classList.toggle('active', x === v); });
    document.querySelectorAll('header a').forEach(function(a){ a.classList.toggle('on', v && a.getAttribute('href') === '#' + v.id); });
    for(var d = el.parentElement; d; d = d.parentElement){ if(d.tagName === 'DETAILS'){ d.open = true; } }
    if(el.tagName === 'DETAILS'){ el.open = true; }
    if(el === v){ window.scrollTo(0, 0); } else {
      el.scrollIntoView({block: el.tagName === 'SECTION' ? 'start' : 'center'}); el.classList.add('hit');
      setTimeout(function(){ el.classList.remove('hit'); }, 1600); }
  }
  window.addEventListener('hashchange', function(){ show(decodeURIComponent(location.hash.slice(1))); });
  show(decodeURIComponent(location.hash.slice(1)));
  document.addEventListener('click', function(ev){
    var b = ev.target.closest('button.oc'); if(!b){ return; }
    var rec = b.getAttribute('data-rec'), split = b.getAttribute('data-split');
    var item = data[rec][split], n = item[1], raw = atob(item[0]);
    var correct = [], wrong = [];
    for(var i = 0; i < n; i++){ var bit = (raw.charCodeAt(i >> 3) >> (7 - (i & 7))) & 1; correct.push(bit); if(!bit){ wrong.push(i); } }
    var box = b.closest('details.record').querySelector('.ocview');
    var cols = Math.min(n, 100), rows = Math.ceil(n / cols), s = 6;
    var c = document.createElement('canvas'); c.width = cols * s; c.height = rows * s; c.className = 'ocgrid';
    var g = c.getContext('2d');
    for(var j = 0; j < n; j++){
      g.fillStyle = correct[j] ? '#59a14f' : '#e15759'; g.fillRect((j % cols) * s, Math.floor(j / cols) * s, s - 1, s - 1);
    }
    box.innerHTML = '';
    var p = document.createElement('p');
    p.textContent = split + ': ' + (n - wrong.length) + ' of ' + n + ' examples right (green), by example index; wrong: ' +
      (wrong.length ? wrong.slice(0, 200).join(', ') + (wrong.length > 200 ? ' ...' : '') : 'none');
    box.appendChild(p); box.appendChild(c);
  });
})();
"""
