"""What the client raises."""
from __future__ import annotations

import errno


class TsockError(Exception):
    """The mount, the consumer or a batch file is not what it should be."""


class MountClosed(TsockError):
    """The tsock daemon is stopping or gone: a producer's work is over."""


# errnos of a mount whose daemon stops (ESHUTDOWN) or is gone.
GONE = (errno.ESHUTDOWN, errno.ENOTCONN, errno.ECONNABORTED)

