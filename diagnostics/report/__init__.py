"""`mgtutor report`: a run record as one self-contained HTML file, or a GitHub issue body.

gather.py reads the record (facts, diagnosis, hang stacks and Flight Recorder, logs, meters), every
string through redact.py; charts.py draws matplotlib SVG; render.py fills the Jinja2 templates in
templates/. Headless: no textual, no torch.
"""
