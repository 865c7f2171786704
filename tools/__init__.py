"""Build-time tools of the checkout: nothing in sglang_sentinel imports them at run time."""
