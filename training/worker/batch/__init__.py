"""The batch searches inside the ranks: the built-in finder (batchfind, maxbatch) and a user script's fit trial."""
