"""Files the commands write: atomically, with the mode a reader expects."""

from __future__ import annotations

import pytest


@pytest.mark.unit
def test_a_rendered_file_keeps_its_mode_and_a_new_one_is_readable_by_others(tmp_path):
    """A Prometheus running as another user reads the rules: a new file is 0644 (less the umask), a file re-rendered
    keeps the mode it had, never a temporary file's 0600."""
    import os
    import stat

    from exporter.common.files import write_atomically

    new = tmp_path / "new.yml"
    write_atomically(new, "a: 1\n")
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o644 & ~umask
    kept = tmp_path / "kept.yml"
    kept.write_text("old\n")
    kept.chmod(0o640)
    write_atomically(kept, "new\n")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    assert kept.read_text() == "new\n"
