"""The dashboard's screens: the main one and its dialogs."""

from rltui.ui.screens.clone import CloneDialog
from rltui.ui.screens.dashboard import DashboardScreen
from rltui.ui.screens.editor import HParamEditor
from rltui.ui.screens.help import HelpScreen
from rltui.ui.screens.quit import QuitConfirm, RollbackConfirm, StopRunConfirm

__all__ = ["CloneDialog", "DashboardScreen", "HParamEditor", "HelpScreen", "QuitConfirm", "RollbackConfirm",
           "StopRunConfirm"]
