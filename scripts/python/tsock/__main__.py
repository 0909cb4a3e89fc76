"""python3 -m tsock status MOUNTPOINT [--watch] [--json]: the view that
`tsock status` draws, for machines without the tsock binary on PATH."""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import List, Optional

from tsock import status


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tsock", description="Look at a tsock mount.")
    commands = parser.add_subparsers(dest="command", required=True)
    st = commands.add_parser("status", help="show a mount: the producer, the buffer, every consumer")
    st.add_argument("mountpoint")
    how = st.add_mutually_exclusive_group()
    how.add_argument("-w", "--watch", action="store_true", help="redraw every --interval until Ctrl-C")
    how.add_argument("--json", action="store_true", help="print one snapshot as JSON (MOUNTPOINT/status.json)")
    st.add_argument("--interval", type=float, default=1.0, help="seconds between redraws with --watch (default 1)")
    args = parser.parse_args(argv)
    if not 0.1 <= args.interval <= 3600:
        parser.error(f"--interval {args.interval}: want 0.1 to 3600 seconds")
    try:
        if args.json:
            print(json.dumps(status.read(args.mountpoint), indent=2))
        elif args.watch:
            _watch(args.mountpoint, args.interval)
        else:
            sys.stdout.write(status.render(status.read(args.mountpoint), args.mountpoint))
    except status.StatusError as e:
        print(f"tsock: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def _watch(mount: str, interval: float) -> None:
    """Redraws until Ctrl-C: in place (the alternate screen) on a
    terminal, one view after another anywhere else."""
    terminal = sys.stdout.isatty()
    if terminal:
        sys.stdout.write("\x1b[?1049h\x1b[?25l")
    try:
        first = True
        while True:
            view = status.render(status.read(mount), mount)
            if terminal:
                view = "\x1b[H" + view.replace("\n", "\x1b[K\n") + "\x1b[J"
            elif not first:
                view = "\n" + view
            sys.stdout.write(view)
            sys.stdout.flush()
            first = False
            time.sleep(interval)
    finally:
        if terminal:
            sys.stdout.write("\x1b[?25h\x1b[?1049l")
            sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
