"""Sales reports and data export."""
