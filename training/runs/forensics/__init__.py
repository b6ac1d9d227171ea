"""What a run left behind when it hung or crashed: every rank's stacks (and the ranks' stack hook), NCCL's Flight Recorder, py-spy's text, the compiler's native crash."""
