"""Billing: invoices, payments, refunds, tax and currency conversion."""
