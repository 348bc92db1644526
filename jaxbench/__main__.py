from jaxbench.cli import main

main()
