"""Published runs, the fit of each GPU kind's two constants, and the accuracy report."""
