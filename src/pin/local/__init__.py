"""Development only: `pin up` (the whole system on one machine), its demo data, its state folder, and the embedded
PostgreSQL and broker it starts when none is configured. Production roles import nothing from here."""
