"""CodeClosure's runtime agents, run as command executors (``python -m ... ROLE``).

They speak the executor protocol (one JSON request on stdin, one reply on
stdout) with the candidate workspace as their working directory and a
capability that custody checks at commit: discovery, plan, freeze and the
checks hold read capabilities, so none of them can change the candidate.
"""
