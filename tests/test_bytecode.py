"""Where Python would not keep bytecode (PYTHONDONTWRITEBYTECODE=1), parbench keeps it in its cache
folder, for itself and the processes it starts; PARBENCH_BYTECODE_CACHE=0 leaves that alone."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = ("import os, sys, parbench, email.mime.text; "
          "print(sys.pycache_prefix, os.environ.get('PYTHONPYCACHEPREFIX'), os.environ.get('PYTHONDONTWRITEBYTECODE'))")


def run(tmp_path, setting: str) -> list[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PARBENCH_BYTECODE_CACHE": setting}
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True).stdout.split()


def test_bytecode_is_kept_in_the_cache_folder_and_children_inherit_it(tmp_path):
    assert run(tmp_path, str(tmp_path)) == [str(tmp_path), str(tmp_path), "None"]
    assert list(tmp_path.rglob("text.cpython-*.pyc")), "email.mime.text imported after parbench was not cached"


def test_zero_leaves_the_interpreter_alone(tmp_path):
    assert run(tmp_path, "0") == ["None", "None", "1"]
