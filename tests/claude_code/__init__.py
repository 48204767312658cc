"""The real Claude Code as a test client: installed with npm into a cache folder
(:mod:`.client`), driven headless against a stand-in for the Messages API that plays the
model (:mod:`.model`), with a permission-prompt tool that approves (:mod:`.approver`)."""
