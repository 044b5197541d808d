"""`spacy-elmo inspect PIPELINE`: the learned ELMo layer weights of each component.

For every scalar mix in a trained pipeline (listeners and inline Tok2VecElmo
models), print softmax(s) per biLM layer and gamma, the view of Peters et al.
(2018), section 5.5 and Figure 2; optionally save them as a bar chart.
"""
from pathlib import Path
from typing import List, NamedTuple, Optional

import numpy
import typer
from wasabi import msg

from .app import app
from ..errors import InputError, SpacyElmoError, one_line
from ..figures import agg_pyplot, save_figure
from ..output_files import check_output_file


class LayerMix(NamedTuple):
    """One component's learned mix: ``weights`` = softmax(s), *Shape:* ``(L + 1,)``."""

    component: str
    weights: numpy.ndarray
    gamma: float


@app.command("inspect")
def inspect_command(
    pipeline: str = typer.Argument(..., help="A trained pipeline: its directory or package name."),
    png: Optional[Path] = typer.Option(
        None, "--png", help="Also save a bar chart of the layer weights (needs matplotlib)."
    ),
) -> None:
    """Print each ELMo component's layer weights softmax(s) and gamma."""
    if png is not None:  # before the pipeline loads: never among its files
        check_output_file(png, inputs=[Path(pipeline)])  # a package name is no path: nothing to compare
    mixes = layer_mixes(_load(pipeline))
    if not mixes:
        raise SpacyElmoError(f"No component of {pipeline} mixes ELMo layers (no trained scalar mix)")
    n_layers = max(len(mix.weights) for mix in mixes)
    header = ["component"] + [_layer_name(j) for j in range(n_layers)] + ["gamma"]
    rows = [
        [mix.component] + [f"{w:.3f}" for w in mix.weights] + [""] * (n_layers - len(mix.weights))
        + [f"{mix.gamma:.3f}"]
        for mix in mixes
    ]
    msg.info("softmax(s) per biLM layer (0 = token layer, 1..L = biLSTM layers) and gamma")
    msg.table(rows, header=header, divider=True, aligns=["l"] + ["r"] * (n_layers + 1))
    if png is not None:
        save_chart(mixes, png)
        msg.good(f"Saved the chart to {png}")


def layer_mixes(nlp) -> List[LayerMix]:
    """The trained scalar mixes in ``nlp``, by component (``name#k`` when a
    component has several)."""
    from ..models.scalar_mix_layer import find_mixes, mix_parameters

    found = []
    for name, component in nlp.components:
        model = getattr(component, "model", None)
        if not hasattr(model, "walk"):
            continue
        mixers = find_mixes(model)
        for k, mixer in enumerate(mixers):
            weights, gamma = mix_parameters(mixer)
            label = name if len(mixers) == 1 else f"{name}#{k}"
            found.append(LayerMix(label, weights, gamma))
    return found


def save_chart(mixes: List[LayerMix], path: Path) -> None:
    """A grouped bar chart: one group per biLM layer, one bar per component."""
    plt = agg_pyplot()
    n_layers = max(len(mix.weights) for mix in mixes)
    bar = 0.8 / len(mixes)
    fig, ax = plt.subplots(figsize=(2 + 1.5 * n_layers, 3.5 + 0.25 * len(mixes)))
    for i, mix in enumerate(mixes):
        positions = numpy.arange(len(mix.weights)) + (i - (len(mixes) - 1) / 2) * bar
        ax.bar(positions, mix.weights, width=bar, label=f"{mix.component} (gamma {mix.gamma:.2f})")
    ax.set_xticks(numpy.arange(n_layers), [_layer_name(j) for j in range(n_layers)])
    ax.set_ylabel("softmax(s)")
    ax.set_title("Learned ELMo layer weights")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def _layer_name(j: int) -> str:
    return "tokens" if j == 0 else f"lstm {j}"


def _load(pipeline: str):
    import spacy

    try:
        return spacy.load(pipeline)
    except SpacyElmoError:
        raise
    except OSError as err:
        raise InputError(f"Cannot load the pipeline {pipeline}: {err}") from None
    except (ValueError, KeyError, TypeError) as err:  # a file cut short or damaged
        raise InputError(
            f"Cannot load the pipeline {pipeline}: a file in it is damaged or incomplete ({one_line(err, 200)})"
        ) from None
