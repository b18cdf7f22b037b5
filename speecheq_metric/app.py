"""Hub Space entry point: the evaluate widget of the SpeechEQ metric in this folder.

The evaluate module file is named after the Space (`speecheq.py` in
SpeechEQ/speecheq, `speecheq_metric.py` in a checkout), so it is looked up as
the one file here that defines an evaluate.Metric.
"""

from pathlib import Path

import evaluate
from evaluate.utils import launch_gradio_widget


def module_file(folder: Path) -> Path:
    """The evaluate module in `folder`: its one Python file that defines an evaluate.Metric subclass."""
    found = [p for p in sorted(folder.glob("*.py")) if p.name != "app.py" and "(evaluate.Metric):" in p.read_text(encoding="utf-8")]
    if len(found) != 1:
        raise RuntimeError(f"{folder}: expected one evaluate module file, found {[p.name for p in found]}")
    return found[0]


launch_gradio_widget(evaluate.load(str(module_file(Path(__file__).resolve().parent))))
