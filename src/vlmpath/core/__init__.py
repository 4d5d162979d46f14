"""The ground floor: errors, atomic writes and the registry type every layer uses."""
