"""``@aleph.tool`` reads parameter descriptions from Google, reST and NumPy docstrings (docstring_parser)."""

from __future__ import annotations

import aleph


def test_google_style_descriptions_wrapped_over_lines_become_one_sentence() -> None:
    @aleph.tool(idempotent=True)
    def scale(value: float, factor: float = 2.0) -> float:
        """Multiply a value.

        Longer text that stays part of the description.

        Args:
            value (float): The number to scale,
                read as a float.
            factor: How much.
        """
        return value * factor

    d = scale.definition()
    assert "Multiply a value.\n\nLonger text that stays part of the description." == d.description
    assert "The number to scale, read as a float." == d.input_schema["properties"]["value"]["description"]
    assert "How much." == d.input_schema["properties"]["factor"]["description"]


def test_rest_style_params() -> None:
    @aleph.tool(idempotent=True)
    def greet(name: str) -> str:
        """Say hello.

        :param name: Who to greet.
        :returns: the greeting
        """
        return f"hello {name}"

    d = greet.definition()
    assert "Say hello." == d.description
    assert "Who to greet." == d.input_schema["properties"]["name"]["description"]


def test_numpy_style_params() -> None:
    @aleph.tool(idempotent=True)
    def count(text: str) -> int:
        """Count words.

        Parameters
        ----------
        text : str
            The text to count.
        """
        return len(text.split())

    assert "The text to count." == count.definition().input_schema["properties"]["text"]["description"]
    assert "Count words." == count.definition().description


def test_a_docstring_without_sections_is_all_description() -> None:
    @aleph.tool(idempotent=True)
    def ping() -> str:
        """Answer pong: nothing else."""
        return "pong"

    assert "Answer pong: nothing else." == ping.definition().description


def test_a_given_description_still_takes_parameter_descriptions_from_the_docstring() -> None:
    @aleph.tool(description="Scale a number.", idempotent=True)
    def scale(value: float, factor: float = 2.0) -> float:
        """Multiply a value.

        Args:
            value: The number to scale.
            factor: How much.
        """
        return value * factor

    d = scale.definition()
    assert d.description == "Scale a number."
    assert d.input_schema["properties"]["value"]["description"] == "The number to scale."
    assert d.input_schema["properties"]["factor"]["description"] == "How much."
