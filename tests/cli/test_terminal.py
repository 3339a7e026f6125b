"""What the CLI prints cannot take over the terminal: text from outside (a job's output and
error, notes, actors, worker and job names, schedule ids) shows its control and bidi
characters as escapes, on stdout and stderr; ``--json`` keeps them exactly."""

from __future__ import annotations

from cronsvc.cli.term import printable

# A terminal retitles its window (OSC ... BEL) and clears the screen (CSI 2J); the override
# makes what follows read backwards.
TAKEOVER = "\x1b]0;TITLE\x07\x1b[2J"
SHOWN = r"\x1b]0;TITLE\x07\x1b[2J"


# -- the rule --------------------------------------------------------------------------------
def test_printable_shows_controls_as_escapes_and_keeps_the_layout() -> None:
    assert printable("a\x1b[2Jb\x07\x00") == r"a\x1b[2Jb\x07\x00"
    assert printable("ok\rFAILED") == r"ok\x0dFAILED"  # no overwriting what was printed
    assert printable("us\x1f del\x7f c1\x80\x9b\x9f nbsp\xa0é") == (
        "us\\x1f del\\x7f c1\\x80\\x9b\\x9f nbsp\xa0é")
    # The explicit bidi controls; a mark (U+200F) only sets a direction and stays.
    assert printable("a\u202eb\u202a\u2066c\u2069\u200f") == (
        "a\\u202eb\\u202a\\u2066c\\u2069\u200f")
    assert printable("line 1\n\tline 2\n") == "line 1\n\tline 2\n"
    assert printable("one\nline\there", cell=True) == r"one\x0aline\x09here"
    assert printable("C:\\x1b ↳ …") == "C:\\x1b ↳ …"  # shown once, it shows the same again
    assert printable(printable(TAKEOVER)) == SHOWN
