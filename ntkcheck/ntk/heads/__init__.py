"""How many heads, and what the head law says: the rank of the Gram of ``H`` heads, the head
search of a screening, and the certificate of the head law's NTK (``H`` = infinity)."""
