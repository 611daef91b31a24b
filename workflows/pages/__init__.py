"""The workflow pages: the list, one workflow with its graph and run history, and the buttons."""
