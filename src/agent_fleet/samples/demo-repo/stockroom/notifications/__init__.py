"""Customer notifications by e-mail and SMS."""
