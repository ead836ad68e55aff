"""Shared by the input tests (``tests/test_inputs_*.py``): the command line run in-process, and a
refusal checked to be one line with exit status 2."""

from bench.cli import main


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line(code, err, *words):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("bench: error:"), (code, err)
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]
