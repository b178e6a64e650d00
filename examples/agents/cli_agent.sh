#!/bin/sh
# Plug a real CLI coding agent into CodeClosure as the IMPLEMENT worker:
#
#   execsys goal create ... --agent-command "examples/agents/cli_agent.sh {prompt_file}"
#
# CodeClosure runs this in the candidate workspace (a copy of the project) with
# the prompt file's path as $1. The agent edits files in place; CodeClosure lists
# the changes itself afterwards and custody refuses any change to a protected
# path. To ask instead, write the question to "$EXECSYS_QUESTION_FILE" and exit 0.
# A non-zero exit fails the turn. Replace AGENT below with your agent's
# non-interactive mode (most take the task as an argument or on stdin).
set -eu
prompt_file="$1"
AGENT="${EXECSYS_AGENT:-my-coding-agent}"
exec "$AGENT" --non-interactive --prompt "$(cat "$prompt_file")"
