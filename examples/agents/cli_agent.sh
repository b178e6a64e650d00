#!/bin/sh
# Plug a real CLI coding agent into CodeClosure as the IMPLEMENT worker:
#
#   export EXECSYS_AGENT='your-agent --its-non-interactive-flags'
#   execsys goal create ... --agent-command "examples/agents/cli_agent.sh {prompt_file}"
#
# CodeClosure runs this in the candidate workspace (a copy of the project) with
# the prompt file's path as $1. This script runs the command line in
# $EXECSYS_AGENT through sh, in the same folder, with the prompt's text on its
# standard input and the prompt file's path in $EXECSYS_PROMPT_FILE, so either
# kind of agent fits. Two shapes that work (check your agent's own flags):
#
#   EXECSYS_AGENT='my-agent --non-interactive'                       # task on stdin
#   EXECSYS_AGENT='my-agent --yes --message-file "$EXECSYS_PROMPT_FILE"'
#
# The agent edits files in place; CodeClosure lists the changes itself
# afterwards and custody refuses any change to a protected path. To ask
# instead, write the question to "$EXECSYS_QUESTION_FILE", change nothing, and
# exit 0. A non-zero exit fails the turn.
set -eu
prompt_file="$1"
if [ -z "${EXECSYS_AGENT:-}" ]; then
  echo "cli_agent.sh: set EXECSYS_AGENT to your agent's non-interactive command line" >&2
  exit 64
fi
EXECSYS_PROMPT_FILE="$prompt_file"
export EXECSYS_PROMPT_FILE
exec sh -c "$EXECSYS_AGENT" < "$prompt_file"
