# Sphinx settings for numa.kube's HTML reference, built by tools/build-docs (make docs).
# The pages come from the plugins' and roles' own documentation through antsibull-docs; nothing
# here is fetched from the network, so links into Ansible's own docsite stay unresolved (the build
# script names those it accepts).

project = "numa.kube"
copyright = "numa.kube contributors"
title = "numa.kube reference"
html_short_title = title

extensions = ["sphinx_antsibull_ext"]
pygments_style = "ansible"
highlight_language = "YAML+Jinja"

html_theme = "sphinx_ansible_theme"
html_show_sphinx = False
html_copy_source = False
html_use_modindex = False
html_use_index = False

default_role = "any"
nitpicky = True
