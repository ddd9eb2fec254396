#!/usr/bin/env bash
# Regenerates the reference made from the code: docs/reference/cli.md (every command and option, from the same
# specs as --help), docs/reference/errors.md (the error code table) and the man page docs/reference/trailbook-jobs.1.
# ReferenceFilesTests fails when the committed files differ from what the code makes.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product trailbook-jobs >&2
bin="$(swift build --show-bin-path)/trailbook-jobs"
mkdir -p docs/reference
"$bin" help --markdown > docs/reference/cli.md
"$bin" help --errors > docs/reference/errors.md
"$bin" help --man > docs/reference/trailbook-jobs.1
echo "regenerated docs/reference/cli.md, errors.md and trailbook-jobs.1" >&2
