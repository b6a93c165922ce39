"""mkdocs-gen-files script: writes the generated reference pages into the site at build time."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).parent))

import refgen  # noqa: E402
from agent_fleet.control.schema import openapi_document  # noqa: E402

with mkdocs_gen_files.open("reference/cli.md", "w") as f:
    f.write(refgen.cli_markdown())
with mkdocs_gen_files.open("reference/fleet-yaml.md", "w") as f:
    f.write(refgen.fleet_yaml_markdown())
with mkdocs_gen_files.open("reference/rest-api.md", "w") as f:
    f.write(refgen.rest_markdown(openapi_document()))
with mkdocs_gen_files.open("reference/openapi.json", "w") as f:
    json.dump(openapi_document(), f, indent=2)
