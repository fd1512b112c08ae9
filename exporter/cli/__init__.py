"""The command line: the parser and dispatch (main), each group of subcommands in a module, the demo.

The top of the tree: may import everything.
"""
