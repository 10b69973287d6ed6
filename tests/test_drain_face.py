"""Every drain shows the process that runs it one face
(:class:`dataflow.run.drain.face.Draining`): :mod:`dataflow.run.drain.foreground` and
RunJob's report call it the same way whichever runs."""

import inspect

import pytest

from dataflow.run.drain.drain import Drain
from dataflow.run.drain.driven import DriverDrain
from dataflow.run.drain.face import Draining
from dataflow.run.drain.workers import WorkerDrain

FACE = [name for name in vars(Draining) if not name.startswith("_")]


def test_the_face_is_what_foreground_and_the_report_call():
    assert sorted(FACE) == ["left", "pass_on", "run", "stop"]
    assert Draining.__annotations__ == {"summary": "Summary"}


@pytest.mark.parametrize("drain", [Drain, DriverDrain, WorkerDrain])
def test_each_drain_shows_the_face(drain):
    for name in FACE:
        assert name in vars(drain), f"{drain.__name__} has no {name}"
        want = inspect.signature(getattr(Draining, name))
        have = inspect.signature(getattr(drain, name))
        assert list(have.parameters) == list(want.parameters), (drain.__name__, name)
        assert have.return_annotation == want.return_annotation, (drain.__name__, name)
    source = inspect.getsource(drain.__init__)
    assert "self.summary" in source, f"{drain.__name__} keeps no summary"
