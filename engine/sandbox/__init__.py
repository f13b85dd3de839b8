"""Templates and conditions in the Jinja2 sandbox: the environment, its bounds, native
conditions. Imports only the ground floor."""
