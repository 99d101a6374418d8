"""Phase-aware probes (registry): token-exact items at every offset."""

from phasescope.probes.base import Probe, ProbeError, ProbeItem
from phasescope.probes.kv_retrieval import KVRetrievalProbe, KVRetrievalSpec
from phasescope.probes.padding_completion import CompletionSpec, PaddingCompletionProbe

PROBES: dict[str, type[Probe]] = {cls.name: cls for cls in (KVRetrievalProbe, PaddingCompletionProbe)}

__all__ = [
    "PROBES",
    "CompletionSpec",
    "KVRetrievalProbe",
    "KVRetrievalSpec",
    "PaddingCompletionProbe",
    "Probe",
    "ProbeError",
    "ProbeItem",
]
