"""Running shell commands."""

import logging
import subprocess

log = logging.getLogger(__name__)


def run(command):
    log.debug("running %s", command)
    result = subprocess.run(command, shell=True, capture_output=True, text=True)
    if result.returncode != 0:
        log.error("command failed: %s", result.stderr.strip())
    return result.stdout


def run_checked(command):
    return subprocess.check_output(command, shell=True, text=True)


def disk_usage(path):
    out = run(f"du -sh {path}")
    return out.split()[0] if out else "?"
