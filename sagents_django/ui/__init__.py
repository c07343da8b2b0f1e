"""What the chat pages show, as plain data and sanitized HTML.

The views, the HTML socket consumer and the template tags share these helpers, so a
row looks the same whether the page rendered it or the socket pushed it.
"""
