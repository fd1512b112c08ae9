"""The subcommands behind the CLI; each module imports what it needs only when it runs."""
