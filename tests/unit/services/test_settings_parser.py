"""Each setting is declared once, in its service's settings model: the command line is
made from the model (a flag per field, its help the field's description and default)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.acker.settings import AckerSettings
from services.api.settings import ApiSettings
from services.bolts.settings import BoltSettings, SpareSettings
from services.common import load_settings, settings_parser
from services.spout.settings import SpoutSettings
from services.worker.settings import WorkerSettings


class Color(StrEnum):
    RED = "red"
    BLUE = "blue"


class Demo(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SQUALL_DEMO_", frozen=True)

    name: str = Field(description="who")
    count: int = Field(3, description="how many")
    ratio: float | None = Field(None, description="how much")
    loud: bool = Field(False, description="shout")
    mode: Literal["a", "b"] = Field("a", description="which way")
    color: Color = Field(Color.RED, description="what color")
    where: Path = Field(Path("x"), description="a path")
    hidden: int = Field(0, exclude=True)


def test_a_flag_per_field_typed_with_its_description_and_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    p = settings_parser(Demo, "demo", "a demo")
    text = p.format_help()
    for said in ("--name NAME", "who", "--count COUNT", "how many (default 3)",
                 "--loud, --no-loud", "shout (default False)", "--mode {a,b}",
                 "--color {red,blue}", "what color (default red)", "a path (default x)"):
        assert said in text, said
    assert "--hidden" not in text
    s = load_settings(Demo, p, ["--name", "n", "--count", "5", "--ratio", "0.5", "--loud",
                                "--mode", "b", "--color", "blue"], "demo")
    assert (s.name, s.count, s.ratio, s.loud, s.mode, s.color) == (
        "n", 5, 0.5, True, "b", Color.BLUE)
    # A flag not given leaves the environment's value standing.
    monkeypatch.setenv("SQUALL_DEMO_COUNT", "9")
    assert load_settings(Demo, p, ["--name", "n"], "demo").count == 9
    with pytest.raises(SystemExit):
        p.parse_args(["--mode", "c"])


@pytest.mark.parametrize("cls", [AckerSettings, ApiSettings, BoltSettings, SpareSettings,
                                 SpoutSettings, WorkerSettings])
def test_every_service_setting_says_what_it_is(cls: type[BaseModel]) -> None:
    """The model is the one home of a setting: each field that is a flag has its help."""
    missing = [n for n, f in cls.model_fields.items() if not f.exclude and not f.description]
    assert missing == []
