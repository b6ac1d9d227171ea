"""One screen per file: a mode of the app, or a modal."""
