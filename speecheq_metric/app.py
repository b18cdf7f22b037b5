"""Hub Space entry point: a gradio form over the SpeechEQ metric module in this folder.

The evaluate module file is named after the Space (`speecheq.py` in
SpeechEQ/speecheq, `speecheq_metric.py` in a checkout), so it is looked up as
the one file here that defines an evaluate.Metric. The form is built here rather
than by evaluate's `launch_gradio_widget`: evaluate 0.4.6 builds it with
`gr.inputs`, which gradio 4 removed, and gradio 3 does not start beside the
huggingface_hub that datasets 5 needs. evaluate's parsing helpers are reused.
"""

from pathlib import Path

import evaluate
import gradio as gr
from evaluate.utils import infer_gradio_input_types
from evaluate.utils import json_to_string_type
from evaluate.utils import parse_gradio_data
from evaluate.utils import parse_readme

FOLDER = Path(__file__).resolve().parent
# One dialogue per row, [turn-4 choice, turn-6 choice] as JSON lists: the first row is right at both turns.
EXAMPLE_ROWS = [["[1, 2]", "[1, 2]"], ["[2, 2]", "[1, 2]"], ["[2, 1]", "[2, 1]"]]


def module_file(folder: Path) -> Path:
    """The evaluate module in `folder`: its one Python file that defines an evaluate.Metric subclass."""
    found = [p for p in sorted(folder.glob("*.py")) if p.name != "app.py" and "(evaluate.Metric):" in p.read_text(encoding="utf-8")]
    if len(found) != 1:
        raise RuntimeError(f"{folder}: expected one evaluate module file, found {[p.name for p in found]}")
    return found[0]


def build_form(metric: evaluate.Metric) -> gr.Interface:
    """A table with one column per input feature (one row per dialogue) whose submit shows the metric's scores."""
    features = metric.features[0] if isinstance(metric.features, list) else metric.features
    names = list(features)
    input_types = infer_gradio_input_types(list(features.values()))

    def compute(table):
        return metric.compute(**parse_gradio_data(table, input_types))

    table = gr.Dataframe(value=EXAMPLE_ROWS, headers=names, column_count=len(names), datatype=json_to_string_type(input_types),
                         type="pandas", label="one dialogue per row")
    return gr.Interface(fn=compute, inputs=table, outputs=gr.JSON(label=metric.name), title=f"Metric: {metric.name}",
                        description=metric.info.description, article=parse_readme(FOLDER / "README.md"), flagging_mode="never")


if __name__ == "__main__":
    build_form(evaluate.load(str(module_file(FOLDER)))).launch()
