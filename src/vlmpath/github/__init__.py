"""Talking to GitHub: the REST client, the one sticky PR comment, issues, and regression alerts on main."""
