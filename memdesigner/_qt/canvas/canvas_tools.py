"""The canvas tools for big graphs, installed into the window in one call: the minimap, Ctrl+F
(find a layer), and the layout styles (bands or top to bottom) run off the UI thread."""

from __future__ import annotations

from PySide6.QtGui import QAction

from memdesigner._qt.canvas import find_layer, minimap
from memdesigner._qt.canvas.layout_runner import LayoutRunner


def install(win, view_menu) -> None:
    win.layout_runner = LayoutRunner(win, win.scene, win.view, win.stack, win.statusBar().showMessage)
    win.minimap = minimap.install(win.view)
    win.find_layer = find_layer.install(win)
    act_map = QAction("&Minimap", win)
    act_map.setCheckable(True)
    act_map.setChecked(True)
    act_map.setStatusTip("An overview of the whole canvas: click or drag in it to move there")
    act_map.toggled.connect(win.minimap.setVisible)
    win.act_minimap = act_map
    view_menu.addSeparator()
    view_menu.addActions(list(win.layout_runner.actions.values()))
    view_menu.addSeparator()
    view_menu.addActions([win.find_layer.action, act_map])
