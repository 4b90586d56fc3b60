"""The reasoning graph over HTTP: wire models (`protocol`) and the logic behind the routes (`service`)."""
