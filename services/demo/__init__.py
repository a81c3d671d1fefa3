"""The v1 story on realistic data (`make demo`) and the seeding of held runs it and tests use."""
