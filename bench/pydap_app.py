"""pydap's DAP2 server over a NetCDF file, for bench_server.py: the file named by
``PYDAP_FILE`` is opened with netCDF4 once per worker and each variable handed to pydap
lazily, so a request reads only its hyperslab from the file (``gunicorn pydap_app:app``).

pydap's own NetCDF handler (``pydap --data DIR``) cannot serve a hyperslab: it reshapes
the subset to the variable's whole shape (pydap/pydap#130, #184, #217). This is the same
pydap server code (constraint parsing, DDS/DAS, XDR encoding) with a working reader.
"""

import os

import netCDF4
from pydap.handlers.lib import BaseHandler
from pydap.model import BaseType, DatasetType

_nc = netCDF4.Dataset(os.environ["PYDAP_FILE"])
_nc.set_auto_maskandscale(False)
_dataset = DatasetType(os.path.basename(os.environ["PYDAP_FILE"]))
for _name, _var in _nc.variables.items():
    _attrs = {a: _var.getncattr(a) for a in _var.ncattrs()}
    _dataset[_name] = BaseType(
        _name, data=_var, dims=_var.dimensions, attributes=_attrs, dtype=_var.dtype, shape=_var.shape
    )
app = BaseHandler(_dataset)
