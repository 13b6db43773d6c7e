"""The rows' folders (egraph/input_rows.py): a process killed by a signal leaves its folder
behind, and the next folder made with the same prefix removes it, but never a live process's."""

from __future__ import annotations

import os
import subprocess
import sys

from leir_egraph.egraph.input_rows import remove_orphans, rows_folder

KILLED = """
import os, signal, sys
from leir_egraph.egraph.input_rows import rows_folder
folder = rows_folder(sys.argv[1])
open(os.path.join(folder.name, "R.tsv"), "w").write("1\\t2\\n")
print(folder.name, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_process_folder_is_removed_by_the_next_one_and_a_live_one_is_kept():
    prefix = f"leir-test-{os.getpid()}x-"   # this test's own prefix: no other run's folders
    done = subprocess.run([sys.executable, "-c", KILLED, prefix], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == -9, done.stderr
    left = done.stdout.strip()
    assert os.path.isfile(os.path.join(left, "R.tsv"))   # nothing ran at its end
    parent, name = os.path.split(left)
    assert name.startswith(prefix) and name[len(prefix):].split("-")[0].isdigit()
    live = rows_folder(prefix)          # removes the killed process's folder
    try:
        assert not os.path.exists(left)
        assert os.path.isdir(live.name)
        assert os.path.dirname(live.name) == parent
        assert remove_orphans(parent, prefix) == []    # this process runs: kept
        assert os.path.isdir(live.name)
    finally:
        live.cleanup()
    assert not os.path.exists(live.name)
