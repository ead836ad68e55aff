"""A sync study's bracket state as it is read back: ``bracket.json`` (``brackets``), the tuning seeds,
what a pick rests on (``evidence``, ``evidence_text``) and what a row used (``budget``); read by
the bracket's driver (bench/tune/sync.py) and by the study's summary (bench/tune/study.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import UserError


def tuning_seeds(meta: dict) -> list[int]:
    """The seeds a sync study trains: its seed, and the next one for the configurations in contention."""
    return [meta["seed"], meta["seed"] + 1]


def evidence(meta: dict, b: dict) -> dict:
    """What a bracket's pick rests on: per contender (the pick first, then every configuration
    trained on the second seed or within the noise at the end) its score on each tuning seed and
    the score it was selected on (their mean), and the pick's flags; ``nothing_learned`` instead of
    a pick when the model learned nothing."""
    last = str(len(b["fractions"]) - 1)
    seeds = tuning_seeds(meta)

    def one(k):
        c = b["configs"][k]
        got = {str(seeds[0]): c["scores"].get(last)}
        if "score" in (b["second"].get(k) or {}):
            got[str(seeds[1])] = b["second"][k]["score"]
        return {
            "config": k,
            "seeds": got,
            "selection": (b.get("selection") or {}).get(k, c["scores"].get(last)),
            **({"diverged": c["diverged"]} if c.get("diverged") else {}),
        }

    if b.get("pick") is None:
        return {"pick": None, "nothing_learned": b.get("nothing_learned"), "flags": b.get("flags", [])}
    others = [k for k in dict.fromkeys([*(b.get("selection") or {}), *b["second"]]) if k != b["pick"] and last in b["configs"][k]["scores"]]
    return {
        "pick": one(b["pick"]),
        "contenders": [one(k) for k in others],
        "flags": b.get("flags", []),
        "alone": b.get("contention") == [b["pick"]],
    }


def evidence_text(ev: dict) -> str:
    """A pick's evidence in one line: its seeds and scores, the other contenders', the flags (a pick
    on one seed, said so, is a study's from before every pick got the second seed)."""

    def one(e):
        seeds = ", ".join(f"seed {s} {100 * v:.1f}" for s, v in e["seeds"].items() if v is not None)
        mean = f"; mean {100 * e['selection']:.1f}" if len(e["seeds"]) > 1 and e.get("selection") is not None else ""
        return f"{e['config']} ({seeds}{mean})"

    if not ev or ev.get("pick") is None:
        return "no pick" + (f": nothing learned ({ev['nothing_learned']['why']})" if ev and ev.get("nothing_learned") else "")
    pick = ev["pick"]
    text = one(pick) + (
        "" if len(pick["seeds"]) > 1 else ": one seed" + (", no other configuration within the noise at the end" if ev.get("alone") else "")
    )
    if ev.get("contenders"):
        text += "; beside " + ", ".join(one(e) for e in ev["contenders"])
    if ev.get("flags"):
        text += "; FLAGGED: " + "; ".join(ev["flags"])
    return text


def budget(b: dict) -> dict:
    """What a row's bracket used: rungs (step: configurations that reached it), the rungs passed
    (no configuration above the chance level: nobody stopped), the configurations trained on the
    second seed, and the steps trained in full-run units."""
    reached = {}
    for c in b["configs"].values():
        for r in c["scores"]:
            reached[int(r)] = reached.get(int(r), 0) + 1
    full = b.get("full_steps") or 0
    return {
        "rungs": [(b["steps"].get(str(r)), reached[r]) for r in sorted(reached)],
        "second": sorted(b["second"]),
        "steps": b["trained_steps"],
        "full_runs": b["trained_steps"] / full if full else math.nan,
        "extension": b.get("extension"),
        "passed": [d["step"] for d in b.get("decisions", []) if d.get("passed")],
    }


def brackets(folder: Path) -> dict:
    path = folder / "bracket.json"
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{path} cannot be read ({exc}); remove it to start the brackets over (finished runs are read back, not trained again)"
        ) from None
