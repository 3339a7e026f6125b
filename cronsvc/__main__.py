from __future__ import annotations

from cronsvc.cli.main import main

main()
