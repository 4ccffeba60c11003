"""The aggregation layer, as kube-apiserver's kube-aggregator runs it: APIService registrations
(`registrations.py`, pure), the front-proxy identity (`certs.py`), the availability checks that write
each APIService's `Available` condition (`availability.py`) and the proxy (`proxy.py`)."""
