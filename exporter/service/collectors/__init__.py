"""Every collector the exporter serves, each building fresh families per scrape on the common ``FamilyCollector``."""
