"""Profiler traces (XSpace) built in the tests, shaped as a GPU's: device planes and a host plane.

No GPU is lent to CI, so the device-plane path of :func:`jaxbench.measure.trace.op_table` is
checked on XSpaces written here with protobuf's own message classes, from the fields of
``xla/tsl/profiler/protobuf/xplane.proto`` (XSpace, XPlane, XLine, XEvent, XEventMetadata) that
:class:`jax.profiler.ProfileData` reads. They are synthetic, not recorded: ``scripts/gpu-check``
records a real GPU trace under ``OUT/traced/traces/`` where a GPU is lent.
"""

from __future__ import annotations

import functools
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "tensorflow.profiler"
#: Each message's fields: name, number, type and, for a message, its type name.
_MESSAGES = {
    "XSpace": [("planes", 1, _F.TYPE_MESSAGE, "XPlane")],
    "XPlane": [("id", 1, _F.TYPE_INT64, None), ("name", 2, _F.TYPE_STRING, None),
               ("lines", 3, _F.TYPE_MESSAGE, "XLine"),
               ("event_metadata", 4, _F.TYPE_MESSAGE, "XPlane.EventMetadataEntry")],
    "XLine": [("id", 1, _F.TYPE_INT64, None), ("name", 2, _F.TYPE_STRING, None),
              ("timestamp_ns", 3, _F.TYPE_INT64, None),
              ("events", 4, _F.TYPE_MESSAGE, "XEvent")],
    "XEvent": [("metadata_id", 1, _F.TYPE_INT64, None), ("offset_ps", 2, _F.TYPE_INT64, None),
               ("duration_ps", 3, _F.TYPE_INT64, None)],
    "XEventMetadata": [("id", 1, _F.TYPE_INT64, None), ("name", 2, _F.TYPE_STRING, None)],
}  # fmt: skip
_REPEATED = {"planes", "lines", "events", "event_metadata"}


@functools.cache
def _xspace_class() -> Any:
    fd = descriptor_pb2.FileDescriptorProto(name="jaxbench_tests_xplane.proto",
                                            package=_PACKAGE, syntax="proto3")  # fmt: skip
    for name, fields in _MESSAGES.items():
        message = fd.message_type.add(name=name)
        for field, number, kind, type_name in fields:
            label = _F.LABEL_REPEATED if field in _REPEATED else _F.LABEL_OPTIONAL
            added = message.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                added.type_name = f".{_PACKAGE}.{type_name}"
        if name == "XPlane":  # map<int64, XEventMetadata> event_metadata
            entry = message.nested_type.add(name="EventMetadataEntry")
            entry.field.add(name="key", number=1, type=_F.TYPE_INT64, label=_F.LABEL_OPTIONAL)
            value = f".{_PACKAGE}.XEventMetadata"
            entry.field.add(name="value", number=2, type=_F.TYPE_MESSAGE,
                            label=_F.LABEL_OPTIONAL, type_name=value)  # fmt: skip
            entry.options.map_entry = True
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.XSpace"))


def xspace(planes: dict[str, dict[str, list[tuple[str, float, float]]]]) -> bytes:
    """A serialized XSpace of ``{plane: {line: [(event, start_ns, duration_ns), ...]}}``."""
    space = _xspace_class()()
    for plane_id, (plane_name, lines) in enumerate(planes.items(), start=1):
        plane = space.planes.add(id=plane_id, name=plane_name)
        ids: dict[str, int] = {}
        for line_id, (line_name, events) in enumerate(lines.items(), start=1):
            line = plane.lines.add(id=line_id, name=line_name, timestamp_ns=1_000)
            for name, start_ns, duration_ns in events:
                if name not in ids:
                    ids[name] = len(ids) + 1
                    plane.event_metadata[ids[name]].id = ids[name]
                    plane.event_metadata[ids[name]].name = name
                line.events.add(metadata_id=ids[name], offset_ps=int(start_ns * 1000),
                                duration_ps=int(duration_ns * 1000))  # fmt: skip
    return space.SerializeToString()
