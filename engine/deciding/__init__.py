"""What the service checks of a decision before the store's atomic step: feedback, reasons, typed values, an edit."""
